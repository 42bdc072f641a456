"""What every test shares: timings never decide an outcome. hypothesis fails an example that
takes longer than its deadline (200 ms by default); on a busy machine (CI on two cores, a
benchmark beside it) a correct example can, so no example has a deadline."""

from hypothesis import settings

settings.register_profile("memstream", deadline=None)
settings.load_profile("memstream")
