#!/bin/sh
# Adds mcpcell to Claude Code as a stdio MCP server (user scope: every project).
claude mcp add --scope user mcpcell -- mcpcell serve
