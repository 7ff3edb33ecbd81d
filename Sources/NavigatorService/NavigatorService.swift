/// Namespace of the NavigatorService module; its parts come with later issues.
public enum NavigatorServiceModule {}
