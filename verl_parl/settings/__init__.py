"""The bottom of the settings stack: config errors that name their key, type checks of raw sections, and the
hand-off of typed settings from the driver to workers.
"""
