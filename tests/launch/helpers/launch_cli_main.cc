// `giant launch` as a program of its own, for tests/launch: the tests signal
// it, read its output and check its exit status.
#include <string>
#include <vector>

namespace giant::app {
int launch_command(const std::vector<std::string>& args);
}

int main(int argc, char** argv) { return giant::app::launch_command(std::vector<std::string>(argv + 1, argv + argc)); }
