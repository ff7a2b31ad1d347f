"""``python -m hf_cse.eval``, kept for the short name: runs :mod:`hf_cse.commands.eval`."""

if __name__ == "__main__":
    from hf_cse.commands.eval import console_main

    console_main()
