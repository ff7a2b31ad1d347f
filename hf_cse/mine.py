"""``python -m hf_cse.mine``, kept for the short name: runs :mod:`hf_cse.commands.mine`."""

if __name__ == "__main__":
    from hf_cse.commands.mine import console_main

    console_main()
