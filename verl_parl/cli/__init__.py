"""Command-line entry points and the driver of a run: compose and validate the config, build assets,
launch verl's trainer, and report (console, plots, failures). The top layer: nothing else imports it.
"""
