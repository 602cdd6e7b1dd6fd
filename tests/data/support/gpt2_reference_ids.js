// node gpt2_reference_ids.js PACKAGE_DIR FILE
//
// Prints the token ids that the npm package gpt-3-encoder (its Encoder.js,
// in PACKAGE_DIR) gives FILE, space-separated on one line. FILE is read as
// node reads text: UTF-8, each ill-formed subpart becoming U+FFFD.
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

const [packageDir, file] = process.argv.slice(2);
if (!packageDir || !file) {
  process.stderr.write('usage: node gpt2_reference_ids.js PACKAGE_DIR FILE\n');
  process.exit(2);
}
const { encode } = require(path.resolve(packageDir, 'Encoder.js'));
const text = fs.readFileSync(file, 'utf8');

const pieceLength = 8192;  // UTF-16 units: short enough that concat's copying stays small
const ids = [];
let start = 0;
for (const m of text.matchAll(/\p{L}(?!\p{L})/gu)) {
  const end = m.index + m[0].length;
  if (end - start >= pieceLength) {
    for (const id of encode(text.slice(start, end))) ids.push(id);
    start = end;
  }
}
for (const id of encode(text.slice(start))) ids.push(id);
process.stdout.write(ids.join(' ') + '\n');
