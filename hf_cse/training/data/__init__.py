"""What a run trains on: the corpus, labelled pairs, streams and their position, and the collator."""
