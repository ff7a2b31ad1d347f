"""``python -m hf_cse.push``, kept for the short name: runs :mod:`hf_cse.commands.push`."""

if __name__ == "__main__":
    from hf_cse.commands.push import console_main

    console_main()
