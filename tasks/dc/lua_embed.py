#!/usr/bin/env python3
"""Writes the C header of the dc plugin's Lua scripts, one string constant each.

Usage: lua_embed.py OUTPUT FILE.lua... Each script's constant (dc_lua_<stem>) is
prelude.lua and volume_rules.lua followed by the script; a view's (view_*.lua) has
view_page.lua between, a disk operation's (disk_*.lua) disk_rules.lua, a volume
operation's (volume_op_*, volume_snapshot*, volume_network*) volume_op_rules.lua. The preludes
themselves get no constant. The strings are written with JSON's escapes, which C reads the same for the
characters a Lua file holds.
"""
import json
import os
import sys

out_path, files = sys.argv[1], sys.argv[2:]
by_stem = {os.path.basename(f)[:-4]: f for f in files}


def read(stem):
    with open(by_stem[stem], encoding="utf-8") as f:
        return f.read()


with open(out_path, "w", encoding="utf-8") as out:
    out.write("/* Generated from the scripts of tasks/dc/lua by tasks/dc/lua_embed.py. */\n")
    for stem in sorted(by_stem):
        if stem in ("prelude", "volume_rules", "view_page", "disk_rules", "volume_op_rules",
                    "migration_rules"):
            continue
        middle = ""
        if stem.startswith("view_migration"):
            middle = read("view_page") + read("migration_rules")
        elif stem.startswith("view_"):
            middle = read("view_page")
        elif stem.startswith("migration_"):
            middle = read("migration_rules")
        elif stem.startswith("disk_"):
            middle = read("disk_rules")
        elif stem.startswith(("volume_op_", "volume_snapshot", "volume_network")):
            middle = read("volume_op_rules")
        text = read("prelude") + read("volume_rules") + middle + read(stem)
        out.write(f"static const char dc_lua_{stem}[] = {json.dumps(text, ensure_ascii=True)};\n")
