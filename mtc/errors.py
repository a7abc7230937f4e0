"""The one error type that means "bad input": the command line prints it as one line and
exits 2. Any other exception (a numerical failure inside a fit) keeps its traceback, exit 1."""


class InputError(ValueError):
    """Bad input from the user: data, parameters, configuration or command line."""
