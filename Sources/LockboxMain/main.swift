import lockbox

LockboxTool.main()
