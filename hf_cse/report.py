"""``python -m hf_cse.report``, kept for the short name: runs :mod:`hf_cse.commands.report`."""

if __name__ == "__main__":
    from hf_cse.commands.report import console_main

    console_main()
