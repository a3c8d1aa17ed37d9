import Edge

/// Placeholder namespace of the LinkAssoc module; its issue fills it in.
public enum LinkAssocModule {}
