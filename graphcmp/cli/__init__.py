"""The `graphcmp` command line: each subcommand parses, calls one core function, renders, exits."""
