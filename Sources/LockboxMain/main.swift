import LockboxCLI

LockboxTool.main()
