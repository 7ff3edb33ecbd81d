/// Namespace of the NavigatorCore module: the pure model, route map and resolver.
public enum NavigatorCoreModule {}
