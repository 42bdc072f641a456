"""Per-user content keys (crypto-shredding): where they are kept (``store``) and sealing and
opening events with them (``sealing``)."""
