// ortdist's web smoke runner: one model through onnxruntime-web's own JS on a given wasm module.
// node run.mjs <ort entry .mjs> <directory holding ort-wasm-simd-threaded.{mjs,wasm}> <case dir>
// The case directory holds case.json ({"model": file, "inputs": [{"file", "dims"}]}) and the
// float32 inputs; the outputs are written as out_<i>.bin (float32, in the session's output order)
// and result.json says what happened: {"ok", "error", "input_names", "output_names", "ms"}.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [entry, wasmDir, caseDir] = process.argv.slice(2);
const result = { ok: false };
try {
  const ort = await import(pathToFileURL(resolve(entry)).href);
  ort.env.wasm.wasmPaths = pathToFileURL(resolve(wasmDir)).href + '/';
  ort.env.wasm.numThreads = 2;
  const spec = JSON.parse(readFileSync(join(caseDir, 'case.json'), 'utf8'));
  const session = await ort.InferenceSession.create(new Uint8Array(readFileSync(join(caseDir, spec.model))));
  result.input_names = session.inputNames;
  result.output_names = session.outputNames;
  const feeds = {};
  spec.inputs.forEach((input, i) => {
    const raw = readFileSync(join(caseDir, input.file));
    const data = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
    feeds[session.inputNames[i]] = new ort.Tensor('float32', data, input.dims);
  });
  const started = performance.now();
  const outputs = await session.run(feeds);
  result.ms = performance.now() - started;
  session.outputNames.forEach((name, i) => {
    const data = outputs[name].data;
    writeFileSync(join(caseDir, `out_${i}.bin`), Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  });
  result.ok = true;
} catch (error) {
  result.error = String(error && error.message ? error.message : error);
}
writeFileSync(join(caseDir, 'result.json'), JSON.stringify(result));
process.exit(result.ok ? 0 : 3);
