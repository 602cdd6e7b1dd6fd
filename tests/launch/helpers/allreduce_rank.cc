// A rank for tests/launch: joins the world through ccl's bootstrap (the
// variables `giant launch` sets), writes its pid to PIDDIR/pid.RANK, then runs
// allreduces, checking each result and printing progress.
//
//   giant_launch_test_rank PIDDIR ITERATIONS   (0: until killed)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "giant/base/tunables.h"
#include "giant/ccl/bootstrap.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/config.h"

namespace {

void write_pid_file(const std::string& dir, int rank) {
  std::string path = dir + "/pid." + std::to_string(rank);
  {
    std::ofstream out(path + ".tmp");
    out << ::getpid() << "\n";
  }
  std::rename((path + ".tmp").c_str(), path.c_str());  // readers never see half a pid
}

int run(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PIDDIR ITERATIONS\n", argv[0]);
    return 2;
  }
  const std::string pid_dir = argv[1];
  const long iterations = std::stol(argv[2]);
  giant::ccl::Environment env = giant::ccl::Environment::from_process();
  giant::Tunables tunables;
  giant::ccl::CommConfig::define_tunables(tunables);
  tunables.apply_environment(env.vars());
  giant::ccl::Bootstrap boot = giant::ccl::bootstrap_from_environment(env, tunables);
  giant::ccl::Communicator& comm = *boot.world;
  write_pid_file(pid_dir, comm.rank());
  std::printf("rank %d of %d ready, host id '%s', %d host(s)\n", comm.rank(), comm.size(),
              env.get("GIANT_HOST_ID").value_or("").c_str(), comm.topology().num_hosts());
  std::fflush(stdout);

  const float expected = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
  std::vector<float> input(1024, static_cast<float>(comm.rank() + 1));
  std::vector<float> output(input.size());
  for (long i = 1; iterations == 0 || i <= iterations; ++i) {
    giant::ccl::AllreduceOptions options;
    options.input = input.data();
    options.output = output.data();
    options.count = input.size();
    giant::ccl::allreduce(comm, options).wait();
    for (float value : output) {
      if (value != expected) {
        std::fprintf(stderr, "wrong allreduce result %g, expected %g\n", value, expected);
        return 3;
      }
    }
    if (i % 20 == 0) {
      std::printf("iteration %ld ok\n", i);
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  giant::ccl::barrier(comm).wait();  // nobody leaves while a peer still finishes
  std::printf("done sum=%g\n", static_cast<double>(expected));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
