# The rank's libraries that need no torch headers: their tests build in
# seconds, and the `sanitize` build (TRAINCTL_WITH_WORKER=OFF) includes this
# file too, so they also run under ASan and UBSan.
set(_train ${PROJECT_SOURCE_DIR}/worker/train)

# TensorBoard event files.
add_library(trainctl_tensorboard STATIC ${_train}/tensorboard_writer.cc)
target_compile_options(trainctl_tensorboard PRIVATE ${TRAINCTL_WARNINGS})
target_link_libraries(trainctl_tensorboard PUBLIC trainctl_common trainctl_proto)

# Precision, recall, F1 and the confusion matrix from class counts
# (eval_metrics.h); evaluation.cc counts on the device.
add_library(trainctl_eval_metrics STATIC ${_train}/eval_metrics.cc)
target_compile_options(trainctl_eval_metrics PRIVATE ${TRAINCTL_WARNINGS})
target_include_directories(trainctl_eval_metrics PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(trainctl_eval_metrics PUBLIC absl::strings)

# malloc settings for the rank process (heap_reuse.h).
add_library(trainctl_heap_reuse STATIC ${_train}/heap_reuse.cc)
target_compile_options(trainctl_heap_reuse PRIVATE ${TRAINCTL_WARNINGS})
target_include_directories(trainctl_heap_reuse PUBLIC ${PROJECT_SOURCE_DIR})

# Decoded copies of gzip inputs on the worker's disk (data/decoded_cache.h).
add_library(trainctl_decoded_cache STATIC ${_train}/data/decoded_cache.cc)
target_compile_options(trainctl_decoded_cache PRIVATE ${TRAINCTL_WARNINGS})
target_link_libraries(trainctl_decoded_cache PUBLIC trainctl_common ZLIB::ZLIB)

# JPEG and PNG decoding for webdataset shards (data/image_decode.h).
add_library(trainctl_image_decode STATIC ${_train}/data/image_decode.cc)
target_compile_options(trainctl_image_decode PRIVATE ${TRAINCTL_WARNINGS})
target_include_directories(trainctl_image_decode PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(trainctl_image_decode PUBLIC absl::status absl::statusor
                      JPEG::JPEG PNG::PNG)

# What a rank sees of a sharded data set, checked across ranks
# (data/shard_manifest.h); checksums kept beside the decoded copies.
add_library(trainctl_shard_manifest STATIC ${_train}/data/shard_manifest.cc)
target_compile_options(trainctl_shard_manifest PRIVATE ${TRAINCTL_WARNINGS})
target_link_libraries(trainctl_shard_manifest PUBLIC trainctl_decoded_cache
                      trainctl_data_probe ZLIB::ZLIB)
