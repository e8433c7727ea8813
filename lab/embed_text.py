#!/usr/bin/env python3
"""Writes a C header holding a text file as one string constant.

Usage: embed_text.py INPUT OUTPUT NAME. The string is written with JSON's escapes,
which C reads the same for the characters a JSON or text file holds.
"""
import json
import sys

src, dst, name = sys.argv[1:4]
with open(src, encoding="utf-8") as f:
    text = f.read()
with open(dst, "w", encoding="utf-8") as out:
    out.write(f"/* Generated from {src.split('/')[-1]} by lab/embed_text.py. */\n")
    out.write(f"static const char {name}[] = {json.dumps(text, ensure_ascii=True)};\n")
