"""Talking to an OpenAI-compatible model: the extractor that turns a transcript into memory
candidates (``extractor``)."""
