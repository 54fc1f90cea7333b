"""One request to a vLLM server or an mmgate gateway on loopback, for the differential
grids: its status, whether the answer is vLLM's mm-kwargs gate error, and the answer."""
import http.client

GATE = b"Per-request mm_processor_kwargs"


def send(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, body, {"content-type": "application/json"})
    r = c.getresponse()
    answer = r.read()
    c.close()
    return r.status, GATE in answer, answer
