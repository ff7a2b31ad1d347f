"""``python -m hf_cse.download``, kept for the short name: runs :mod:`hf_cse.commands.download`."""

if __name__ == "__main__":
    from hf_cse.commands.download import console_main

    console_main()
