"""FaceCast's invisible watermark: a keyed spread-spectrum mark on every output frame, and the
detector that finds it again after codecs, scaling, crops and screen recordings.

payload: what the mark says (AI-modified, by FaceCast, its version, the run's id) as 64 bits.
design: the keyed chip tile and the geometry shared by the embedder and the detector.
embed: the engine's stage that marks a frame in place (docs/PROVENANCE.md says why it is built so).
detect: accumulates frames and decides, with a confidence figure.
"""
