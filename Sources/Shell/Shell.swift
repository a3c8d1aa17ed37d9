import Edge

/// Placeholder namespace of the Shell module; its issue fills it in.
public enum ShellModule {}
