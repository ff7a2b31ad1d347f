"""The run record: the resume contract's settings, ``training_args.json``, and the card and scores read from them."""
