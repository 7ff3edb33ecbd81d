/// Namespace of the NavigatorClient module; its parts come with later issues.
public enum NavigatorClientModule {}
