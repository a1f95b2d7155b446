"""The app that the documentation's shell examples name as ``myapp.jobs:app``."""
