#!/usr/bin/env python3
"""Writes the Tauri updater manifest (latest.json, the static format) for a
release from the bundles the release workflow built and their `.sig` files.

Each artifact signed by `cargo tauri build` (with `bundle.createUpdaterArtifacts`)
sits next to `<artifact>.sig`, the base64 minisign signature the app checks
against `plugins.updater.pubkey`. The installed app looks itself up as
`<os>-<arch>-<bundle>` (a .deb asks for `linux-x86_64-deb`), then `<os>-<arch>`.

    updater_manifest.py --version 0.2.0 --base-url URL --require KEY,... DIR > latest.json
"""

import argparse
import datetime
import json
import pathlib
import re
import sys
import urllib.parse

# File name pattern -> the platform keys the artifact answers to.
PATTERNS = [
    (re.compile(r"_(amd64|arm64)\.deb$"), lambda m: [f"linux-{arch(m[1])}-deb"]),
    (re.compile(r"\.(x86_64|aarch64)\.rpm$"), lambda m: [f"linux-{m[1]}-rpm"]),
    (re.compile(r"_(amd64|aarch64)\.AppImage$"), lambda m: [f"linux-{arch(m[1])}-appimage"]),
    # A universal macOS app serves both architectures.
    (
        re.compile(r"_universal\.app\.tar\.gz$"),
        lambda m: [f"darwin-{a}{b}" for a in ("x86_64", "aarch64") for b in ("", "-app")],
    ),
    (re.compile(r"_(x64|arm64)-setup\.exe$"), lambda m: [f"windows-{arch(m[1])}-nsis", f"windows-{arch(m[1])}"]),
    (re.compile(r"_(x64|arm64)_[A-Za-z-]+\.msi$"), lambda m: [f"windows-{arch(m[1])}-msi"]),
]


def arch(name):
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(name, name)


def platforms(directory, base_url):
    found = {}
    for sig in sorted(pathlib.Path(directory).rglob("*.sig")):
        artifact = sig.with_name(sig.name[: -len(".sig")])
        if not artifact.is_file():
            sys.exit(f"{sig}: no {artifact.name} beside it")
        keys = next((keys(m) for pattern, keys in PATTERNS if (m := pattern.search(artifact.name))), None)
        if keys is None:
            sys.exit(f"{artifact.name}: not an artifact the updater installs")
        entry = {
            "signature": sig.read_text().strip(),
            "url": f"{base_url.rstrip('/')}/{urllib.parse.quote(artifact.name)}",
        }
        for key in keys:
            if key in found:
                sys.exit(f"{key}: both {found[key]['url']} and {entry['url']}")
            found[key] = entry
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True, help="the release's version, as tauri.conf.json has it")
    parser.add_argument("--base-url", required=True, help="where the release's assets are downloaded from")
    parser.add_argument("--notes", default="", help="release notes the app shows with the update")
    parser.add_argument("--require", default="", help="platform keys that must be present, comma-separated")
    parser.add_argument("directory")
    args = parser.parse_args()
    found = platforms(args.directory, args.base_url)
    missing = [key for key in filter(None, args.require.split(",")) if key not in found]
    if missing:
        sys.exit(f"no signed artifact for {', '.join(missing)} (found: {', '.join(sorted(found)) or 'none'})")
    manifest = {
        "version": args.version,
        "notes": args.notes,
        "pub_date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "platforms": dict(sorted(found.items())),
    }
    json.dump(manifest, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
