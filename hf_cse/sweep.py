"""``python -m hf_cse.sweep``, kept for the short name: runs :mod:`hf_cse.commands.sweep`."""

if __name__ == "__main__":
    from hf_cse.commands.sweep import console_main

    console_main()
