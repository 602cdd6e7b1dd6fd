// node gpt2_reference_ids.js [--time] PACKAGE_DIR FILE
//
// Prints the token ids that the npm package gpt-3-encoder (its Encoder.js,
// in PACKAGE_DIR) gives FILE, space-separated on one line. FILE is read as
// node reads text: UTF-8, each ill-formed subpart becoming U+FFFD. With
// --time, also a line `bench=tokenize impl=node bytes=.. tokens=.. seconds=.. cpu_seconds=..
// mb_per_s=.. wall_mb_per_s=..` on stderr: the encoding alone, mb_per_s from
// the process's CPU time, as bench/data/tokenize_speed.sh reads it.
//
// The package's encode() appends with Array.concat, so its time grows with
// the square of the text (400 KB takes a minute). Long text is therefore
// encoded in pieces cut right after a letter that a non-letter follows: no
// match of GPT-2's pattern runs across such a point, nor looks past it (a
// run of letters ends at the non-letter, whatever comes after), so the ids
// are those of the whole text at once.
'use strict';
const fs = require('fs');
const path = require('path');

const args = process.argv.slice(2);
const time = args[0] === '--time';
const [packageDir, file] = time ? args.slice(1) : args;
if (!packageDir || !file) {
  process.stderr.write('usage: node gpt2_reference_ids.js [--time] PACKAGE_DIR FILE\n');
  process.exit(2);
}
const { encode } = require(path.resolve(packageDir, 'Encoder.js'));
const bytes = fs.readFileSync(file);
const text = bytes.toString('utf8');
const start = process.hrtime.bigint();
const cpuStart = process.cpuUsage();

const pieceLength = 8192;  // UTF-16 units: short enough that concat's copying stays small
const ids = [];
let begin = 0;
for (const m of text.matchAll(/\p{L}(?!\p{L})/gu)) {
  const end = m.index + m[0].length;
  if (end - begin >= pieceLength) {
    for (const id of encode(text.slice(begin, end))) ids.push(id);
    begin = end;
  }
}
for (const id of encode(text.slice(begin))) ids.push(id);
if (time) {
  const cpu = process.cpuUsage(cpuStart);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const mb = bytes.length / 1e6;
  process.stderr.write(`bench=tokenize impl=node bytes=${bytes.length} tokens=${ids.length} ` +
                       `seconds=${seconds.toFixed(4)} cpu_seconds=${cpuSeconds.toFixed(4)} ` +
                       `mb_per_s=${(mb / cpuSeconds).toFixed(2)} wall_mb_per_s=${(mb / seconds).toFixed(2)}\n`);
}
process.stdout.write(ids.join(' ') + '\n');
