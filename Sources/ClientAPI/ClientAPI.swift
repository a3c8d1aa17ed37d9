import Edge

/// Placeholder namespace of the ClientAPI module; its issue fills it in.
public enum ClientAPIModule {}
