from mcp_patchbay.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
