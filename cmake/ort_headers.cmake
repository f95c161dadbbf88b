# ONNX Runtime's C/C++ headers (>= 1.23, the plugin EP API), for OptimEP and examples/cpp: ORT_INCLUDE_DIR
# (cache or environment) first, else the copy `make headers` (ep_plugin/fetch_ort_headers.sh) put in .deps/.
if(NOT ORT_INCLUDE_DIR AND DEFINED ENV{ORT_INCLUDE_DIR})
  set(ORT_INCLUDE_DIR "$ENV{ORT_INCLUDE_DIR}")
endif()
if(NOT ORT_INCLUDE_DIR)
  get_filename_component(ORT_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../.deps/onnxruntime/include" ABSOLUTE)
endif()
if(NOT EXISTS "${ORT_INCLUDE_DIR}/onnxruntime_ep_c_api.h")
  message(FATAL_ERROR
    "ONNX Runtime >= 1.23 C headers not found in '${ORT_INCLUDE_DIR}'. Run "
    "`ep_plugin/fetch_ort_headers.sh .deps/onnxruntime` (what `make headers` does) or set ORT_INCLUDE_DIR "
    "to the include/ folder of an ONNX Runtime release.")
endif()
