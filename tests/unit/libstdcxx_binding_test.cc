// A program linked with torch must take libstdc++'s functions from the
// system's libstdc++. The torch 2.x wheel's libtorch.so exports a copy of
// parts of a libstdc++ of its own (std::filesystem, string streams); when it
// comes first in the program's lookup order our calls land there, and on a
// GPU node's GCC 13 build std::filesystem::remove_all jumped to address 0.
// worker/train/CMakeLists.txt puts libstdc++ first; this says whether it
// worked, in every program of the torch flavour built here.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "worker/train/device.h"  // links torch, as the rank does

namespace trainctl::train {
namespace {

TEST(LibstdcxxBindingTest, OurCallsReachTheSystemLibstdcxx) {
  (void)ResolveDevice("cpu", 0);  // keeps libtorch a dependency of this test
  void* system = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(system, nullptr) << "libstdc++.so.6 is not loaded";
  int checked = 0;
  for (const char* symbol : {
           "_ZNSt10filesystem10remove_allERKNS_7__cxx114pathE",
           "_ZNSt10filesystem18create_directoriesERKNS_7__cxx114pathE",
           "_ZNSt10filesystem6statusERKNS_7__cxx114pathE",
           "_ZNSt7__cxx1119basic_ostringstreamIcSt11char_traitsIcESaIcEEC1Ev",
       }) {
    void* ours = dlsym(system, symbol);
    if (ours == nullptr) continue;  // an older libstdc++ without it
    ++checked;
    void* bound = dlsym(RTLD_DEFAULT, symbol);  // the program's lookup order
    Dl_info info{};
    ASSERT_NE(dladdr(bound, &info), 0) << symbol;
    EXPECT_EQ(bound, ours) << symbol << " resolves in " << info.dli_fname
                           << ": libstdc++.so.6 must precede libtorch in this "
                              "program's DT_NEEDED (worker/train/CMakeLists.txt)";
  }
  EXPECT_GT(checked, 0);
  dlclose(system);
}

}  // namespace
}  // namespace trainctl::train
