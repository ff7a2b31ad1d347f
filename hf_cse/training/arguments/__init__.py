"""The arguments of a run: ``run_unsup.py``'s model and data arguments and parser, their checks, the config file."""
