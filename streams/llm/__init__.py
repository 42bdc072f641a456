"""Talking to an OpenAI-compatible model: reaching its server (``endpoint``: address, key,
headers) and the extractor that turns a transcript into memory candidates (``extractor``)."""
