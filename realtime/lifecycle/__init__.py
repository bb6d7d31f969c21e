"""A run's life, the same for every client (the command line, the control panel, the remote
client and server, file jobs and queue workers): open the input and the outputs, start, watch,
stop, finish the output, and say how it ended with one exit code (see run.py)."""
