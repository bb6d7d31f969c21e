// FaceCast's browser client: camera in, swapped video out, through the same HTTP endpoints as
// `main.py run --remote`. No external scripts: everything the page needs is served here.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { pc: null, location: null, stream: null, frames: 0 };

function setStatus(text) { $("status").textContent = text; }

async function api(method, path, token, body, contentType) {
  const headers = { Authorization: "Bearer " + token };
  if (contentType) headers["Content-Type"] = contentType;
  const response = await fetch(path, { method, headers, body });
  if (!response.ok) {
    let message = "HTTP " + response.status;
    try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

function iceGathered(pc) {
  // The server takes the whole offer at once (no trickle): wait for every candidate.
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => { if (pc.iceGatheringState === "complete") resolve(); };
    pc.addEventListener("icegatheringstatechange", done);
    setTimeout(resolve, 3000);
  });
}

function countFrames(video) {
  const step = () => {
    state.frames += 1;
    $("frames").textContent = String(state.frames);
    video.requestVideoFrameCallback(step);
  };
  if ("requestVideoFrameCallback" in video) video.requestVideoFrameCallback(step);
}

async function start() {
  const token = $("token").value.trim();
  const photo = $("photo").files[0];
  if (!token) return setStatus("enter the server's token");
  if (!photo) return setStatus("choose a source photo");
  if (!$("consent").checked) return setStatus("confirm consent first");
  $("start").disabled = true;
  try {
    setStatus("opening the camera");
    state.stream = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 480 }, audio: false });
    $("local").srcObject = state.stream;
    setStatus("uploading the photo");
    const face = await (await api("POST", "/v1/faces?consent=yes", token, photo, photo.type || "image/png")).json();
    const pc = new RTCPeerConnection({ iceServers: [] });
    state.pc = pc;
    pc.addTransceiver(state.stream.getVideoTracks()[0], { direction: "sendrecv" });
    pc.ontrack = (event) => {
      $("remote").srcObject = new MediaStream([event.track]);
      countFrames($("remote"));
    };
    pc.onconnectionstatechange = () => {
      setStatus(pc.connectionState);
      if (["disconnected", "failed", "closed"].includes(pc.connectionState)) whyEnded(token);
    };
    await pc.setLocalDescription(await pc.createOffer());
    await iceGathered(pc);
    const params = new URLSearchParams({ face: face.id, consent: "yes" });
    if ($("preset").value) params.set("preset", $("preset").value);
    setStatus("connecting");
    const response = await api("POST", "/v1/streams?" + params, token, pc.localDescription.sdp, "application/sdp");
    state.location = response.headers.get("Location");
    await pc.setRemoteDescription({ type: "answer", sdp: await response.text() });
    $("stop").disabled = false;
  } catch (err) {
    setStatus("error: " + err.message);
    $("start").disabled = false;
  }
}

async function whyEnded(token) {
  // The server says why it ended a stream (its time limit, its content policy).
  if (!state.location) return;
  try {
    const body = await (await api("GET", state.location, token)).json();
    if (body.state === "ended") setStatus("ended: " + body.reason);
  } catch (err) { /* the stream is gone from the server's list: nothing more to say */ }
}

async function stop() {
  const token = $("token").value.trim();
  if (state.location) {
    try { await api("DELETE", state.location, token); } catch (err) { setStatus("error: " + err.message); }
  }
  if (state.pc) state.pc.close();
  if (state.stream) state.stream.getTracks().forEach((t) => t.stop());
  state.pc = state.location = state.stream = null;
  $("start").disabled = false;
  $("stop").disabled = true;
  setStatus("stopped");
}

$("start").addEventListener("click", start);
$("stop").addEventListener("click", stop);
