"""Remote GPU: `serve` runs the engine for WebRTC clients; `run --remote` sends a camera to it.

Everything here reaches the engine through realtime.api only.
"""
