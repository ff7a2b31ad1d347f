"""hf_cse's version, in a module of its own at the bottom of the package: the modules that name it (the card's
framework versions, the Hub client's library version, the download's User-Agent) import it from here, not from
``hf_cse/__init__.py``, whose names import the trainer and everything under it on first use."""

__version__ = "0.1.0"
