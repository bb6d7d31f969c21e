"""File jobs: a video file in, a video file out with everything it held, in resumable chunks that
one machine or many workers process (docs/JOBS.md)."""
