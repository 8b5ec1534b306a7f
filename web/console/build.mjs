// Builds the web console into dist/: src/main.ts bundled and minified into app.js (the
// generated stubs of gen/ts and their npm dependencies included), with index.html and
// console.css beside it. The output depends on the sources and package-lock.json alone
// (no timestamps, no absolute paths, no source maps), so that a build of the same commit
// gives the same bytes and CI can check that the committed dist/ is up to date.
//
//   npm run build:console   (at the repository root: type check, then this)

import { build } from "esbuild";
import { copyFile, mkdir, readdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");

// dist/ holds what this build writes and nothing else.
await mkdir(dist, { recursive: true });
for (const f of await readdir(dist)) await rm(join(dist, f), { recursive: true });

await build({
  absWorkingDir: here,
  entryPoints: ["src/main.ts"],
  outfile: "dist/app.js",
  bundle: true,
  format: "esm",
  target: ["es2022", "chrome111", "firefox113", "safari16.4"],
  platform: "browser",
  minify: true,
  sourcemap: false,
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
await copyFile(join(here, "index.html"), join(dist, "index.html"));
await copyFile(join(here, "src", "console.css"), join(dist, "console.css"));
