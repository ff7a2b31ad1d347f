"""``python -m hf_cse.transfer``, kept for the short name: runs :mod:`hf_cse.commands.transfer`."""

if __name__ == "__main__":
    from hf_cse.commands.transfer import console_main

    console_main()
