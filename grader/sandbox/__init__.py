"""The trust boundary: the only code that starts, confines and talks to the processes that run
a submission. It imports nothing else of the kit."""
