"""The plugin host: the pluggy plugin manager (built-ins and the ``verl_parl`` entry-point group), the typed
registries that hooks fill, and import-time hooks on verl's modules.
"""
