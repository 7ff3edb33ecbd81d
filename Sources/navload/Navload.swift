import ArgumentParser
@main struct Main: ParsableCommand { func run() {} }
