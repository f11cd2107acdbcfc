"""`python -m graphcmp` runs the command line."""

from graphcmp.cli.main import run

if __name__ == "__main__":
    run()
